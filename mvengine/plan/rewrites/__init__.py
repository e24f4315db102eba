"""Rewrites of a SELECT: the joins and decorrelation while it is bound (plan/binder.py applies them), then the
passes over the bound plan (passes.py)."""

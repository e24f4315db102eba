"""Rewrites of a SELECT while it is bound: each one module (plan/binder.py applies them)."""

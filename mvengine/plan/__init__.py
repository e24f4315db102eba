"""Logical plans of views: operators, schemas, keys, and how each view will be maintained."""

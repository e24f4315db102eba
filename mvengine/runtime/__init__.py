"""Spark: the session factory and, later, the drivers that run views."""

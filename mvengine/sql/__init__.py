"""SQL: parsing the project's view files with sqlglot (Spark dialect)."""

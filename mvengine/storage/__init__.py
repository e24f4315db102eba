"""Delta Lake storage through delta-rs, exposed to Spark as the Python data source `mvdelta`."""

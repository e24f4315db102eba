"""A project on disk: conf/mvengine.toml and views/*.sql."""

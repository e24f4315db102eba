"""The `mvengine` and `mv` commands: thin wrappers that turn MvErrors into one `Error:` line."""

"""Running views: a refresh as a whole (the lock, the pipeline batch, its steps and their executors), the Spark
session, the writes of a batch, event time and expectations at refresh."""

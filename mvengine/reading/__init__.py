"""Reading what the views hold: versions and time travel, the changelog renderings, describe and history."""

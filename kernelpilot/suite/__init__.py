"""The suite runner: many (problem, candidate) verdicts on every local GPU or a Ray cluster, stored in SQLite,
reported per level (discovery -> pool / ray_pool / agent_mode -> store -> metrics -> report)."""

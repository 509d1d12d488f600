"""The state store: one database (sqlite or PostgreSQL), its migrations, and the tables nothing else owns."""

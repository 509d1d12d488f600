"""Read-only side of trainbot: evidence bundles, parsers, rules and the diagnosis engine.

Nothing here imports bot/ or actions/, and nothing here changes the world.
"""

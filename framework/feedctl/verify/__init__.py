"""`feedctl verify FEED`: check what a feed's sink holds against its tables' change history.

The sink is read as a consumer reads it (files in lexicographic order); the history is read with
`deltalake` alone, its CDC query evaluated by DuckDB rather than Spark, so that the check does not share
the code path it checks.
"""

"""Names a CDC query reads that the aggregator provides. Apart from the query checker, so that Spark's
workers, which build these columns, do not import the SQL parser."""

PREV = "cdc_prev"  # the row before the change, as a struct

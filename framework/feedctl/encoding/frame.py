"""The columns the aggregator hands to encoders and sinks, one row per message, in emission order."""

AFTER = "__after"  # struct: the row after the change (the query's projection); null for a delete
BEFORE = "__before"  # struct: the row before the change; null for an insert (only with diff)
KEY = "__key"  # struct: primary-key values, in key order
TOPIC = "__topic"  # string: the message's topic
SPAN = "__span"  # int32: hash span of the key within its table
OP = "__op"  # string: insert | update | delete
TS_WALL = "__ts_wall"  # int64: event timestamp, nanoseconds
TS_LOGICAL = "__ts_logical"  # int32: event timestamp, logical part
MVCC_WALL = "__mvcc_wall"  # int64: the commit's own timestamp, nanoseconds
VALUE = "__value"  # string: an encoded message

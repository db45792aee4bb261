"""The names of the columns a change carries through a batch, defined once: those of Delta's change data
feed, the previous row a CDC query reads, and the frame a batch's tasks hand to encoders and sinks (one row
per message, in emission order)."""

# Delta's change data feed
CHANGE_TYPE = "_change_type"  # insert | update_preimage | update_postimage | delete
VERSION = "_commit_version"
COMMIT_TIMESTAMP = "_commit_timestamp"
CDF_COLUMNS = (CHANGE_TYPE, VERSION, COMMIT_TIMESTAMP)
AFTER_TYPES = ("insert", "update_postimage")  # change types that hold the row after the change

# A CDC query
PREV = "cdc_prev"  # struct: the row before the change

# The message frame
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
ERROR = "__error"  # string: what no retry fixes, met by the task that reads a CDC query's changes (else null)
TIMES = (SPAN, TS_WALL, TS_LOGICAL, MVCC_WALL)  # where and when each change is emitted

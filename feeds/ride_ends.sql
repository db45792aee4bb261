SELECT id, city, vehicle_id, end_time, revenue, event_op() AS op
FROM {{ source('movr', 'rides') }}
WHERE end_time IS NOT NULL AND cdc_prev.end_time IS NULL

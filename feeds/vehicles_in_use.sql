SELECT id, crdb_region, city, type, status, {{ battery_bucket('current_battery') }} AS battery
FROM {{ source('movr', 'vehicles') }}
WHERE status = 'in_use' AND event_op() != 'delete' AND current_battery >= {{ var('min_battery') }}

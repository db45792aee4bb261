{% macro battery_bucket(column) -%}
CASE WHEN {{ column }} >= 75 THEN 'high' WHEN {{ column }} >= 25 THEN 'medium' ELSE 'low' END
{%- endmacro %}

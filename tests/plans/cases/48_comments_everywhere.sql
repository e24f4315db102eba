/* A view with comments in odd places */
CREATE MATERIALIZED VIEW commented AS -- trailing
SELECT /* inline */ id, -- after a column
       name
FROM customers /* before the end */ ;

CREATE MATERIALIZED VIEW price_range AS
SELECT status, MIN(price) AS lo, MAX(price) AS hi FROM orders GROUP BY status;

CREATE MATERIALIZED VIEW spread AS
SELECT category, STDDEV(price) AS sd, PERCENTILE_APPROX(price, 0.5) AS median FROM products GROUP BY category;

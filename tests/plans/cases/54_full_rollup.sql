CREATE MATERIALIZED VIEW country_rollup AS
SELECT country, name, COUNT(*) AS n FROM customers GROUP BY ROLLUP (country, name);

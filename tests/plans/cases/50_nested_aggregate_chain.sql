CREATE MATERIALIZED VIEW per_country AS
SELECT country, COUNT(*) AS customers FROM customers GROUP BY country;
CREATE MATERIALIZED VIEW country_sizes AS
SELECT customers AS size, COUNT(*) AS countries FROM per_country GROUP BY customers;

CREATE MATERIALIZED VIEW revenue_by_country_category AS
SELECT c.country, p.category, SUM(o.qty * p.price) AS revenue, COUNT(*) AS n
FROM orders o
JOIN customers c ON o.customer_id = c.id
JOIN products p ON o.product_id = p.id
GROUP BY c.country, p.category;

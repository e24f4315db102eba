-- Revenue per customer in euros, over the temporal join: a view over a view.
CREATE MATERIALIZED VIEW revenue_eur AS
SELECT customer, COUNT(*) AS orders, SUM(amount_eur) AS total_eur
FROM orders_in_eur
GROUP BY customer;

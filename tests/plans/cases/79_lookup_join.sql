-- each click with its user's customer row as it was when the click arrived (a lookup join: never revised)
CREATE MATERIALIZED VIEW click_customers AS
SELECT c.url, c.user_id, u.name, u.country
FROM (SELECT *, PROCTIME() AS arrived FROM clicks) AS c
LEFT JOIN customers FOR SYSTEM_TIME AS OF c.arrived AS u ON u.id = c.user_id;
-- over orders, which update and delete rows, PROCTIME() is recomputed: the orders meet the customers as they are
CREATE MATERIALIZED VIEW order_customers AS
SELECT o.id, u.name FROM (SELECT *, PROCTIME() AS p FROM orders) AS o
JOIN customers FOR SYSTEM_TIME AS OF o.p AS u ON u.id = o.customer_id;
-- as of PROCTIME() itself: the clicks' arrival (the customers, which change, are the dimension)
CREATE MATERIALIZED VIEW click_names AS
SELECT c.url, u.name FROM clicks c JOIN customers FOR SYSTEM_TIME AS OF PROCTIME() AS u ON u.id = c.user_id;

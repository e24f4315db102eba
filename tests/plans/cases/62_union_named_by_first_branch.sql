-- A set operation's columns are named by its first branch; later branches need no names (as in Spark).
CREATE MATERIALIZED VIEW ids AS SELECT customer_id AS x FROM orders UNION ALL SELECT id + 1 FROM customers;
CREATE MATERIALIZED VIEW only_orders AS SELECT customer_id AS x FROM orders EXCEPT SELECT id + 1 FROM customers;

-- The WHERE equality between o and c must stay above the RIGHT JOIN, which can NULL-pad both.
CREATE MATERIALIZED VIEW padded AS
SELECT o.id, c.name, p.name AS product
FROM orders o, customers c RIGHT JOIN products p ON c.id = p.id
WHERE o.customer_id = c.id;

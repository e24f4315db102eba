-- The join equality is repeated in every branch of an OR (as in the decision-support query of brands and
-- quantities): taken out of the OR, it is the join's condition; the rest of each branch stays a filter.
CREATE MATERIALIZED VIEW brand_orders AS
SELECT o.id, p.name, o.qty
FROM orders o, products p
WHERE (p.id = o.product_id AND p.category = 'a' AND o.qty BETWEEN 1 AND 11)
   OR (p.id = o.product_id AND p.category = 'b' AND o.qty BETWEEN 10 AND 20);

-- A correlated [NOT] EXISTS with a condition other than an equality too (TPC-H Q21): it tests a view of the
-- outer columns' values that have a match, the join of both tables on the subquery's conditions, distinct
-- (<view>__exists_1, __exists_2); the subquery's condition on its own table stays inside that view.
CREATE MATERIALIZED VIEW shared_products AS
SELECT o1.id, o1.customer_id FROM orders o1
WHERE EXISTS (SELECT 1 FROM orders o2 WHERE o2.product_id = o1.product_id AND o2.customer_id <> o1.customer_id)
  AND NOT EXISTS (
    SELECT 1 FROM orders o3 WHERE o3.product_id = o1.product_id AND o3.qty > o1.qty AND o3.status = 'late'
  );
-- Stays as written, recomputed in full with the reason: no equality (the view would be a join without one), and
-- an outer column under a function (COALESCE(NULL, ..) could match where the view's join could not).
CREATE MATERIALIZED VIEW later_orders_exist AS
SELECT o.id FROM orders o WHERE EXISTS (SELECT 1 FROM orders i WHERE i.ts > o.ts);
CREATE MATERIALIZED VIEW coalesced_orders_exist AS
SELECT o.id FROM orders o
WHERE EXISTS (SELECT 1 FROM orders i WHERE i.product_id = o.product_id AND i.qty > COALESCE(o.qty, 0));

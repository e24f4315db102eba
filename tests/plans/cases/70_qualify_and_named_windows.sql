-- QUALIFY filters on window functions after they are computed (a top-N written without a subquery), and a
-- WINDOW clause names a window for several functions: both planned as their written-out forms.
CREATE MATERIALIZED VIEW latest_order AS
SELECT id, customer_id, ts FROM orders QUALIFY ROW_NUMBER() OVER (PARTITION BY customer_id ORDER BY ts DESC, id) = 1;
CREATE MATERIALIZED VIEW running_spend AS
SELECT id, customer_id, SUM(price) OVER w AS spent, COUNT(*) OVER w3 AS recent
FROM orders
WINDOW w AS (PARTITION BY customer_id ORDER BY ts, id),
       w3 AS (PARTITION BY customer_id ORDER BY ts, id ROWS BETWEEN 2 PRECEDING AND CURRENT ROW);

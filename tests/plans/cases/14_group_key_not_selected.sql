-- The GROUP BY column is not in the output, so the view has no key: it is a bag.
CREATE MATERIALIZED VIEW counts_only AS SELECT COUNT(*) AS n FROM orders GROUP BY customer_id;

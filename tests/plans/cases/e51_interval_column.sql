-- Delta has no interval type: a view column of one is refused at plan time, not at its first write
CREATE MATERIALIZED VIEW waits AS SELECT o.id, c.ts - o.ts AS waited FROM orders o JOIN clicks c ON c.user_id = o.customer_id;

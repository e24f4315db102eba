-- a view reads its inputs as of each batch: a fixed version in FROM is refused, not ignored
CREATE MATERIALIZED VIEW old_orders AS SELECT id FROM orders VERSION AS OF 3;

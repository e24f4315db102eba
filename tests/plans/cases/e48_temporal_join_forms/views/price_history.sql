/* A dimension's versions: one row per price change, dated by its event time. */
CREATE TABLE price_history (
  product_id BIGINT, price DECIMAL(10, 2), ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '1' MINUTE
);

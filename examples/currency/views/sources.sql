-- Orders in several currencies, the payments that settle them, and the exchange rates as they changed.
CREATE TABLE orders (
  id BIGINT NOT NULL, customer STRING, currency STRING, amount DECIMAL(12, 2), ts TIMESTAMP,
  PRIMARY KEY (id) NOT ENFORCED,
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
);
CREATE TABLE payments (
  id BIGINT NOT NULL, order_id BIGINT, paid DECIMAL(12, 2), ts TIMESTAMP,
  PRIMARY KEY (id) NOT ENFORCED,
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
);
-- One row per rate change (a versioned table): each row is valid from its ts until the currency's next one.
CREATE TABLE rates (
  currency STRING, rate DECIMAL(10, 4), ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
) WITH ('append_only' = 'true');

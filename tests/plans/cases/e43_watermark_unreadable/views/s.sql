-- the watermark must be the column less a constant interval
CREATE TABLE readings (sensor STRING, at TIMESTAMP,
  WATERMARK FOR at AS at - INTERVAL '5' SECOND + INTERVAL '1' SECOND)
WITH ('append_only' = 'true');

CREATE TABLE readings (sensor STRING, at BIGINT, WATERMARK FOR at AS at - INTERVAL '5' SECOND)
WITH ('append_only' = 'true');

-- Demo shop for glassbox's built-in tools (src/tools/builtin/shop.ts).
-- Run once, in one transaction, when a shop database has no `orders` table yet.
-- Money is in integer cents; times are ISO 8601 UTC; `items` is a JSON array.

CREATE TABLE customers (
  id         TEXT PRIMARY KEY,                  -- 'U001'
  name       TEXT NOT NULL,
  email      TEXT NOT NULL UNIQUE,
  created_at TEXT NOT NULL
);

CREATE TABLE orders (
  id              TEXT PRIMARY KEY,             -- date + sequence, '20240315001'
  customer_id     TEXT NOT NULL REFERENCES customers (id),
  status          TEXT NOT NULL CHECK (status IN ('pending', 'paid', 'shipped', 'delivered', 'cancelled')),
  items           TEXT NOT NULL CHECK (json_valid(items)),  -- [{"sku","name","quantity","unit_price_cents"}]
  total_cents     INTEGER NOT NULL CHECK (total_cents >= 0),
  created_at      TEXT NOT NULL,
  tracking_number TEXT,
  cancel_reason   TEXT,
  updated_at      TEXT NOT NULL
);
CREATE INDEX orders_by_customer ON orders (customer_id);

-- Outbox: messages the bot has sent to customers.
CREATE TABLE messages (
  id      INTEGER PRIMARY KEY AUTOINCREMENT,
  user_id TEXT NOT NULL REFERENCES customers (id),
  content TEXT NOT NULL CHECK (length(content) BETWEEN 1 AND 2000),
  sent_at TEXT NOT NULL
);

INSERT INTO customers (id, name, email, created_at) VALUES
  ('U001', 'Alice Chen',     'alice.chen@example.com',     '2023-11-02T08:30:00.000Z'),
  ('U002', 'Bruno Martins',  'bruno.martins@example.com',  '2023-12-14T17:05:00.000Z'),
  ('U003', 'Chiara Rossi',   'chiara.rossi@example.com',   '2024-01-20T11:45:00.000Z'),
  ('U004', 'Dmitri Ivanov',  'dmitri.ivanov@example.com',  '2024-02-08T19:10:00.000Z'),
  ('U005', 'Emeka Okafor',   'emeka.okafor@example.com',   '2024-03-01T06:55:00.000Z');

INSERT INTO orders (id, customer_id, status, items, total_cents, created_at, tracking_number, cancel_reason, updated_at) VALUES
  ('20240315001', 'U001', 'delivered',
   '[{"sku":"KB-101","name":"Mechanical keyboard","quantity":1,"unit_price_cents":8999},{"sku":"MP-020","name":"Desk mouse pad","quantity":1,"unit_price_cents":1499}]',
   10498, '2024-03-15T09:12:00.000Z', '1Z999AA10123456784', NULL, '2024-03-19T14:40:00.000Z'),
  ('20240402002', 'U002', 'shipped',
   '[{"sku":"HP-300","name":"Noise-cancelling headphones","quantity":1,"unit_price_cents":12999}]',
   12999, '2024-04-02T13:20:00.000Z', '1Z999AA10123456791', NULL, '2024-04-03T10:05:00.000Z'),
  ('20240410003', 'U001', 'paid',
   '[{"sku":"CB-007","name":"USB-C cable (2 m)","quantity":2,"unit_price_cents":1299},{"sku":"CH-065","name":"65 W USB-C charger","quantity":1,"unit_price_cents":3499}]',
   6097, '2024-04-10T16:48:00.000Z', NULL, NULL, '2024-04-10T16:49:00.000Z'),
  ('20240418004', 'U003', 'pending',
   '[{"sku":"MN-270","name":"27-inch 4K monitor","quantity":1,"unit_price_cents":24999}]',
   24999, '2024-04-18T07:31:00.000Z', NULL, NULL, '2024-04-18T07:31:00.000Z'),
  ('20240420005', 'U004', 'cancelled',
   '[{"sku":"WC-108","name":"1080p webcam","quantity":1,"unit_price_cents":5999}]',
   5999, '2024-04-20T21:02:00.000Z', NULL, 'Customer ordered the wrong model', '2024-04-21T08:15:00.000Z'),
  ('20240501006', 'U005', 'delivered',
   '[{"sku":"LS-200","name":"Aluminium laptop stand","quantity":1,"unit_price_cents":4599},{"sku":"CB-007","name":"USB-C cable (2 m)","quantity":2,"unit_price_cents":1299}]',
   7197, '2024-05-01T10:00:00.000Z', '1Z999AA10123456808', NULL, '2024-05-06T12:30:00.000Z'),
  ('20240512007', 'U002', 'paid',
   '[{"sku":"MS-050","name":"Wireless mouse","quantity":1,"unit_price_cents":3999}]',
   3999, '2024-05-12T18:22:00.000Z', NULL, NULL, '2024-05-12T18:23:00.000Z'),
  ('20240519008', 'U003', 'shipped',
   '[{"sku":"DL-010","name":"LED desk lamp","quantity":1,"unit_price_cents":3499},{"sku":"BL-004","name":"Spare bulb","quantity":4,"unit_price_cents":499}]',
   5495, '2024-05-19T09:40:00.000Z', '1Z999AA10123456815', NULL, '2024-05-20T15:10:00.000Z'),
  ('20240603009', 'U004', 'pending',
   '[{"sku":"KB-101","name":"Mechanical keyboard","quantity":1,"unit_price_cents":8999},{"sku":"WR-030","name":"Wrist rest","quantity":1,"unit_price_cents":1999}]',
   10998, '2024-06-03T14:05:00.000Z', NULL, NULL, '2024-06-03T14:05:00.000Z'),
  ('20240611010', 'U005', 'paid',
   '[{"sku":"HP-300","name":"Noise-cancelling headphones","quantity":1,"unit_price_cents":12999}]',
   12999, '2024-06-11T20:15:00.000Z', NULL, NULL, '2024-06-11T20:16:00.000Z'),
  ('20240620011', 'U001', 'pending',
   '[{"sku":"MP-020","name":"Desk mouse pad","quantity":2,"unit_price_cents":1499}]',
   2998, '2024-06-20T11:11:00.000Z', NULL, NULL, '2024-06-20T11:11:00.000Z'),
  ('20240702012', 'U003', 'delivered',
   '[{"sku":"MA-100","name":"Monitor arm","quantity":1,"unit_price_cents":6999}]',
   6999, '2024-07-02T08:25:00.000Z', '1Z999AA10123456822', NULL, '2024-07-05T16:45:00.000Z');

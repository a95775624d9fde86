CREATE DATABASE shop CHARACTER SET utf8mb4;
CREATE USER 'shop'@'localhost' IDENTIFIED BY 'tidewater-4821';
GRANT SELECT, INSERT, UPDATE ON shop.* TO 'shop'@'localhost';
-- A split topology's app host connects over TCP (MariaDB binds the network only on a db host).
CREATE USER 'shop'@'%' IDENTIFIED BY 'tidewater-4821';
GRANT SELECT, INSERT, UPDATE ON shop.* TO 'shop'@'%';
USE shop;
CREATE TABLE orders (
  id INT PRIMARY KEY,
  customer VARCHAR(64) NOT NULL,
  item VARCHAR(64) NOT NULL,
  quantity INT NOT NULL,
  status VARCHAR(16) NOT NULL
) ENGINE=InnoDB;
INSERT INTO orders VALUES
  (1001, 'Harbor Cafe', 'Mooring line 12mm', 4, 'shipped'),
  (1002, 'Bluefin Charters', 'Bilge pump', 1, 'shipped'),
  (1003, 'Port Ellis Marina', 'Fender, large', 12, 'packed'),
  (1004, 'Saltmarsh Outfitters', 'Deck cleat', 20, 'shipped'),
  (1005, 'Harbor Cafe', 'Navigation lamp', 2, 'pending'),
  (1006, 'Kestrel Boatworks', 'Marine varnish 1L', 6, 'packed'),
  (1007, 'Greywater Ferries', 'Life jacket', 30, 'shipped'),
  (1008, 'Bluefin Charters', 'Anchor chain 10m', 1, 'pending'),
  (1009, 'Osprey Sailing Club', 'Sail repair kit', 3, 'shipped'),
  (1010, 'Port Ellis Marina', 'Dock line 20m', 8, 'pending');
-- Carrier tracking, kept by the old shipping module in MyISAM (the status page shows it).
CREATE TABLE shipments (
  order_id INT PRIMARY KEY,
  carrier VARCHAR(32) NOT NULL,
  tracking VARCHAR(32) NOT NULL
) ENGINE=MyISAM;
INSERT INTO shipments VALUES
  (1001, 'Coastline Freight', 'CF-882130'),
  (1002, 'Bay Couriers', 'BC-209914'),
  (1004, 'Coastline Freight', 'CF-882407'),
  (1007, 'Northsea Haulage', 'NH-551020'),
  (1009, 'Bay Couriers', 'BC-210377');
FLUSH PRIVILEGES;

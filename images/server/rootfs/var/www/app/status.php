<?php
// Order status for trade customers: the page that breaks when the database does.
mysqli_report(MYSQLI_REPORT_OFF);
$cfg = @parse_ini_file('/etc/shop/app.ini', true);
if ($cfg === false || !isset($cfg['database'])) {
    http_response_code(500);
    error_log('status: cannot read /etc/shop/app.ini');
    echo "<h1>Order status unavailable</h1><p>Please try again later.</p>\n";
    exit;
}
$d = $cfg['database'];
// host = localhost: the socket; any other host (a split db host): TCP on port.
$db = @mysqli_connect($d['host'], $d['user'], $d['password'], $d['name'],
    (int)($d['port'] ?? 0), $d['socket'] ?? null);
if (!$db) {
    http_response_code(503);
    error_log('status: database connection failed: ' . mysqli_connect_error());
    echo "<h1>Order status unavailable</h1><p>Please try again later.</p>\n";
    exit;
}
$rows = mysqli_query($db, 'SELECT o.id, o.customer, o.item, o.quantity, o.status, s.carrier FROM orders o'
    . ' LEFT JOIN shipments s ON s.order_id = o.id ORDER BY o.id');
if (!$rows) {
    http_response_code(500);
    error_log('status: query failed: ' . mysqli_error($db));
    echo "<h1>Order status unavailable</h1><p>Please try again later.</p>\n";
    exit;
}
$html = "<!doctype html>\n<html><head><title>Tidewater Supply Co. — order status</title></head><body>\n";
$html .= "<h1>Order status</h1>\n<table>\n<tr><th>Order</th><th>Customer</th><th>Item</th><th>Qty</th><th>Status</th><th>Carrier</th></tr>\n";
$count = 0;
while ($r = mysqli_fetch_assoc($rows)) {
    $count++;
    $html .= sprintf("<tr><td>%d</td><td>%s</td><td>%s</td><td>%d</td><td>%s</td><td>%s</td></tr>\n",
        $r['id'], htmlspecialchars($r['customer']), htmlspecialchars($r['item']),
        $r['quantity'], htmlspecialchars($r['status']), htmlspecialchars($r['carrier'] ?? ''));
}
$html .= "</table>\n<p>orders: $count</p>\n</body></html>\n";
// The page is rendered through a temporary file, as the shop's template cache does:
// a /tmp with no space left fails the page instead of serving half of it.
$tmp = @tempnam(sys_get_temp_dir(), 'status-');
$written = $tmp === false ? false : @file_put_contents($tmp, $html);
if ($written !== strlen($html)) {
    if ($tmp !== false) {
        @unlink($tmp);
    }
    http_response_code(500);
    error_log('status: cannot write the rendered page to ' . sys_get_temp_dir() . ': '
        . (error_get_last()['message'] ?? 'unknown error'));
    echo "<h1>Order status unavailable</h1><p>Please try again later.</p>\n";
    exit;
}
readfile($tmp);
unlink($tmp);

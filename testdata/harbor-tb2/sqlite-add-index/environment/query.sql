SELECT SUM(total) FROM orders WHERE customer = 'c42';

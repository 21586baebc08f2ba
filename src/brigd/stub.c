int brigd_stub;

"""What more than one test module needs: the fixture repositories, forges and servers to start,
and the clients and builders the tests of one area share. Test modules import from here and
never from each other, so a test module can move, split or go without breaking another."""

"""The committed QuickJS-NG guest module, its prelude and build record."""

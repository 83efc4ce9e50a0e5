"""Programs run in the guest: one typed class per guest program or file (guest/tools/)."""

# PLANTED BUG: a percent split posts a share to the wrong account.
# The price is split three ways: the platform fee, the VAT on the sale, and
# the seller's remainder. The VAT portion was written `vat to platform`, so
# the tax authority's account never receives it and the platform keeps it.
# A reviewer should see: fund, deliver, release; `tax_collected` violated
# (tax 0.00 while the VAT share of 1.00 is 0.20).
# Fix: `vat to tax`.
pact "planted.percent_split_wrong_account" version "1.0.0"

currency EUR scale 2

role buyer
role seller

param price: money between 1.00 and 9000.00
param fee: percent = 10%
param vat: percent = 20%

account world    "world" external
account escrow   "escrow:{agreement}"
account seller   "sellers:{seller}:payable"
account platform "platform:fees"
account tax      "tax:vat:payable"

state draft initial
state funded
state delivered
state released final

clause "1" transition fund: draft -> funded {
  by buyer
  transfer price from world to escrow
}

clause "2" transition deliver: funded -> delivered {
  by seller
}

clause "3" transition release: delivered -> released {
  by buyer
  transfer price from escrow {
    fee to platform
    vat to platform
    remaining to seller
  }
}

clause "4.1" invariant escrow_empty_when_final: final implies balance(escrow) == 0
clause "4.2" invariant tax_collected: reached(released) implies balance(tax) >= price * vat

"""The conformance table: every op name -> Spec (see opcheck.py). An op the server lists
that is missing here fails test_every_listed_op_is_in_the_table."""
import optable_elementwise
import optable_nn
import optable_nn2_conv
import optable_nn2_norm
import optable_tensor
import optable_tier2

TABLE = {}
for _part in (optable_elementwise.TABLE, optable_tensor.TABLE, optable_nn.TABLE,
              optable_tier2.TABLE, optable_nn2_conv.TABLE, optable_nn2_norm.TABLE):
    _dup = set(TABLE) & set(_part)
    assert not _dup, f"ops in two table parts: {_dup}"
    TABLE.update(_part)

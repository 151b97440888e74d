"""The conformance table: every op name -> Spec(gen(rng, dtype) -> [Case], dtypes, expected
marking, f32/f64 tolerances) (see opcheck.py), merged from one part per op family. References
are PyTorch calls on the same inputs. An op the server lists that is missing here fails
test_every_listed_op_is_in_the_table."""
import optable_activation
import optable_conv_pool
import optable_creation
import optable_distributed
import optable_elementwise
import optable_embedding_dropout
import optable_indexing_sorting
import optable_linalg
import optable_loss
import optable_norm_resample_attention
import optable_optim
import optable_reduction
import optable_shape

TABLE = {}
for _part in (optable_creation.TABLE, optable_elementwise.TABLE, optable_activation.TABLE,
              optable_reduction.TABLE, optable_shape.TABLE, optable_indexing_sorting.TABLE,
              optable_linalg.TABLE, optable_conv_pool.TABLE, optable_norm_resample_attention.TABLE,
              optable_embedding_dropout.TABLE, optable_loss.TABLE, optable_optim.TABLE,
              optable_distributed.TABLE):
    _dup = set(TABLE) & set(_part)
    assert not _dup, f"ops in two table parts: {_dup}"
    TABLE.update(_part)

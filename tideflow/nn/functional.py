"""`tideflow.nn.functional`: PyTorch's functional API. The ops live in `tideflow.ops`; this
module only re-exports them under their public names."""

from ..ops.activation import *  # noqa: F403
from ..ops.nn.attention import *  # noqa: F403
from ..ops.nn.conv import *  # noqa: F403
from ..ops.nn.ctc import *  # noqa: F403
from ..ops.nn.deform_conv import *  # noqa: F403
from ..ops.nn.distance import *  # noqa: F403
from ..ops.nn.dropout import *  # noqa: F403
from ..ops.nn.embedding import *  # noqa: F403
from ..ops.nn.embedding_bag import *  # noqa: F403
from ..ops.nn.fold import *  # noqa: F403
from ..ops.nn.grid_sampling import *  # noqa: F403
from ..ops.nn.linear import *  # noqa: F403
from ..ops.nn.loss import *  # noqa: F403
from ..ops.nn.margin_loss import *  # noqa: F403
from ..ops.nn.multi_head_attention import *  # noqa: F403
from ..ops.nn.normalization import *  # noqa: F403
from ..ops.nn.padding import *  # noqa: F403
from ..ops.nn.pooling import *  # noqa: F403
from ..ops.nn.sampling import *  # noqa: F403
from ..ops.nn.softmax import *  # noqa: F403

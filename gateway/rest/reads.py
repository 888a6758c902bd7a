"""The read methods the REST routes fetch through `Call.fetch` (coalesced into ReadBatch calls,
gateway/upstream/batching.py): each one's full gRPC path and response type, made once at import."""

from __future__ import annotations

from chain.v1 import rpc_pb2
from gateway.upstream import Read

CHAIN = "/chain.v1.ChainService/"
KEYCHAIN = "/chain.v1.KeychainService/"

GET_ACCOUNT = Read(CHAIN + "GetAccount", rpc_pb2.GetAccountResponse)
LIST_CUSTODY_KEYS = Read(KEYCHAIN + "ListCustodyKeys", rpc_pb2.ListCustodyKeysResponse)
GET_CUSTODY_KEY = Read(KEYCHAIN + "GetCustodyKey", rpc_pb2.GetCustodyKeyResponse)
LIST_MERGE_REQUESTS_BY_REQUESTER = Read(
    CHAIN + "ListMergeRequestsByRequester", rpc_pb2.ListMergeRequestsByRequesterResponse
)
GET_ACCOUNT_ACTIVITY = Read(CHAIN + "GetAccountActivity", rpc_pb2.GetAccountActivityResponse)
LIST_KEYS = Read(CHAIN + "ListKeys", rpc_pb2.ListKeysResponse)
GET_KEY = Read(CHAIN + "GetKey", rpc_pb2.GetKeyResponse)
LIST_VERIFICATIONS = Read(CHAIN + "ListVerifications", rpc_pb2.ListVerificationsResponse)
LIST_LINKS = Read(CHAIN + "ListLinks", rpc_pb2.ListLinksResponse)
LIST_REACTIONS = Read(CHAIN + "ListReactions", rpc_pb2.ListReactionsResponse)
GET_PROJECT_BY_NAME = Read(CHAIN + "GetProjectByName", rpc_pb2.GetProjectByNameResponse)
GET_STORAGE_QUOTA_PROOF = Read(CHAIN + "GetStorageQuotaProof", rpc_pb2.GetStorageQuotaProofResponse)
LIST_BLOCKS = Read(CHAIN + "ListBlocks", rpc_pb2.ListBlocksResponse)
GET_BLOCK = Read(CHAIN + "GetBlock", rpc_pb2.GetBlockResponse)
LIST_MESSAGES = Read(CHAIN + "ListMessages", rpc_pb2.ListMessagesResponse)
GET_MESSAGE = Read(CHAIN + "GetMessage", rpc_pb2.GetMessageResponse)
GET_OPERATION_PROOF = Read(CHAIN + "GetOperationProof", rpc_pb2.GetOperationProofResponse)
GET_EXCLUSION_PROOF = Read(CHAIN + "GetExclusionProof", rpc_pb2.GetExclusionProofResponse)
VERIFY_OPERATION_PROOF = Read(CHAIN + "VerifyOperationProof", rpc_pb2.VerifyOperationProofResponse)
GET_PROJECT = Read(CHAIN + "GetProject", rpc_pb2.GetProjectResponse)
LIST_PROJECTS = Read(CHAIN + "ListProjects", rpc_pb2.ListProjectsResponse)
SEARCH_PROJECTS = Read(CHAIN + "SearchProjects", rpc_pb2.SearchProjectsResponse)
GET_PROJECT_ACTIVITY = Read(CHAIN + "GetProjectActivity", rpc_pb2.GetProjectActivityResponse)
LIST_MERGE_REQUESTS = Read(CHAIN + "ListMergeRequests", rpc_pb2.ListMergeRequestsResponse)
GET_MERGE_REQUEST = Read(CHAIN + "GetMergeRequest", rpc_pb2.GetMergeRequestResponse)
LIST_REFS = Read(CHAIN + "ListRefs", rpc_pb2.ListRefsResponse)
GET_REF = Read(CHAIN + "GetRef", rpc_pb2.GetRefResponse)
GET_REF_LOG = Read(CHAIN + "GetRefLog", rpc_pb2.GetRefLogResponse)
LIST_COMMITS = Read(CHAIN + "ListCommits", rpc_pb2.ListCommitsResponse)
GET_COMMIT = Read(CHAIN + "GetCommit", rpc_pb2.GetCommitResponse)
GET_COMMIT_ANCESTORS = Read(CHAIN + "GetCommitAncestors", rpc_pb2.GetCommitAncestorsResponse)
LIST_REACTIONS_BY_TARGET = Read(CHAIN + "ListReactionsByTarget", rpc_pb2.ListReactionsByTargetResponse)
LIST_COLLABORATORS = Read(CHAIN + "ListCollaborators", rpc_pb2.ListCollaboratorsResponse)
LIST_LINKS_BY_TARGET = Read(CHAIN + "ListLinksByTarget", rpc_pb2.ListLinksByTargetResponse)

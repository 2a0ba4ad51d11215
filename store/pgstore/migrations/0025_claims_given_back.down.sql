DROP TABLE IF EXISTS {schema}.claims_given_back;
